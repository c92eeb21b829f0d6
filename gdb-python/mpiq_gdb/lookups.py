"""Symbol and type lookups in gdb, and the identity under which the bridge
keeps their answers across dumps.

gdb answers a symbol that does not exist (the libraries probe several) only
after searching every objfile, a few milliseconds each. So libmpiq keeps the
answers (its one cache, for every front end) under the identity this module
gives an inferior: its number, its pid, and a generation bumped whenever an
objfile comes or goes or a process exits, since addresses may then change.
"""

import re

import gdb

AGGREGATES = (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION)
_symbol_name = re.compile(r"[A-Za-z_][A-Za-z0-9_:.]*\Z")

_generation = 0  # bumped by every objfile or process event


def forget(*_):
    """A new generation: no answer kept before it is used again (an event
    handler: takes the event)."""
    global _generation
    _generation += 1


def identity(inferior):
    """The key under which libmpiq keeps this inferior's answers."""
    return f"gdb inferior {inferior.num} pid {inferior.pid} generation {_generation}"


# Once per gdb session: Python imports this module once.
for _event in ("new_objfile", "clear_objfiles", "free_objfile", "exited", "inferior_deleted"):
    _registry = getattr(gdb.events, _event, None)
    if _registry is not None:
        _registry.connect(forget)


def lookup_address(name, function):
    """Runtime address of a symbol in any loaded object, or None.

    Debug info first (fast), then gdb's expression evaluator, which also
    sees ELF symbol tables: gdb 13's Python has no minimal-symbol API."""
    if not _symbol_name.match(name):
        return None
    for lookup in (gdb.lookup_global_symbol, gdb.lookup_static_symbol):
        sym = lookup(name)
        if sym is None or sym.needs_frame:
            continue
        if not (sym.is_function if function else (sym.is_variable or sym.is_function)):
            continue
        try:
            address = sym.value().address
        except gdb.error:  # thread-local and the like: ask the evaluator
            continue
        if address is not None:
            return int(address)
    try:
        return int(gdb.parse_and_eval(f"(unsigned long)&'{name}'"))
    except gdb.MemoryError:
        raise
    except gdb.error:  # No symbol "..." in current context.
        return None


def lookup_type(name):
    """gdb.Type for "X", "struct X", "union X", "enum X", a typedef or
    "T *"; a complete definition over an opaque declaration. None if
    there is none."""
    name = " ".join(name.split())
    if name.endswith("*"):
        t = lookup_type(name[:-1])
        return None if t is None else t.pointer()
    tag, _, bare = name.rpartition(" ")
    if tag not in ("struct", "union", "enum"):
        tag, bare = "", name
    # A C struct tag is not a type name: "X" may only exist as "struct X".
    for spelling in ([name] if tag else [name, "struct " + name, "union " + name]):
        try:
            found = gdb.lookup_type(spelling).strip_typedefs()
        except gdb.error:
            continue
        if not incomplete(found):
            return found
    # gdb.lookup_type found only a declaration (or nothing): search every
    # objfile's global and static blocks for a definition.
    domains = [gdb.SYMBOL_STRUCT_DOMAIN] if tag else [gdb.SYMBOL_VAR_DOMAIN, gdb.SYMBOL_STRUCT_DOMAIN]
    for objfile in gdb.objfiles():
        for domain in domains:
            for lookup in (objfile.lookup_global_symbol, objfile.lookup_static_symbol):
                sym = lookup(bare, domain)
                if sym is None or sym.addr_class != gdb.SYMBOL_LOC_TYPEDEF:
                    continue
                t = sym.type.strip_typedefs()
                if not incomplete(t):
                    return t
    return None


def incomplete(t):
    """Whether t is a struct/union declared but not defined here."""
    return t.code in AGGREGATES and t.sizeof == 0 and not t.fields()


def field_table(t):
    """{field name (bytes): byte offset} of a struct/union, members of
    anonymous structs/unions (and C++ base classes) included."""
    table = {}

    def walk(t, base):
        nested = []
        for f in t.fields():
            bitpos = getattr(f, "bitpos", None)  # None: a C++ static member
            if bitpos is None:
                continue
            offset = base + bitpos // 8
            if f.name and not f.is_base_class:
                table.setdefault(f.name.encode(), offset)
            else:
                nested.append((f.type.strip_typedefs(), offset))
        for ft, offset in nested:
            if ft.code in AGGREGATES:
                walk(ft, offset)

    if t.code in AGGREGATES:
        walk(t, 0)
    return table
