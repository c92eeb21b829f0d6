"""Every thread's call stack of one inferior, from gdb's own unwinder, as the
JSON libmpiq reads (docs/json-schema.md, "Thread stack")."""

import json

import gdb

MAX_FRAMES = 256


def _object(frame, pc):
    """The path of the object holding `pc`: a shared library, else the
    objfile of the frame's function (the executable), else None (gdb 13's
    Python has no lookup of an objfile by address)."""
    name = gdb.solib_name(pc)
    if name:
        return name
    function = frame.function()
    if function is not None and function.symtab is not None:
        return function.symtab.objfile.filename
    return None


class _Maps:
    """Where each object is loaded, from gdb's `info proc mappings` (a live
    process's maps, a core's file notes), read once per dump: a pc's
    link-time address in its object (`offset` in the JSON, the CLI's
    `OBJECT+0xOFFSET`), the same in every rank whatever ASLR did."""

    def __init__(self):
        self.rows = []  # (start, end, path)
        self.bias = {}  # path: load bias
        try:
            text = gdb.execute("info proc mappings", to_string=True)
        except gdb.error:
            return
        for line in text.splitlines():
            f = line.split()
            if len(f) < 6 or not f[0].startswith("0x") or not f[-1].startswith("/"):
                continue
            try:
                start, end, offset = int(f[0], 16), int(f[1], 16), int(f[3], 16)
            except ValueError:
                continue
            path = f[-1]
            self.rows.append((start, end, path))
            if offset == 0 and path not in self.bias:
                # A position-independent object (ET_DYN) is linked at 0
                # and loaded at its first mapping; an executable (ET_EXEC)
                # where it was linked.
                self.bias[path] = start if _elf_type(path) == 3 else 0

    def offset(self, pc):
        for start, end, path in self.rows:
            if start <= pc < end:
                bias = self.bias.get(path)
                return None if bias is None else pc - bias
        return None


def _elf_type(path):
    """e_type of the ELF file at `path` (2 executable, 3 shared or PIE), or
    None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return None
    if len(head) < 18 or head[:4] != b"\x7fELF":
        return None
    return int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")


def _frame(frame, maps):
    pc = frame.pc()
    out = {"pc": f"{pc:#x}"}
    name = frame.name()
    if name:
        out["function"] = name
    objfile = _object(frame, pc)
    if objfile:
        out["object"] = objfile
    offset = maps.offset(pc)
    if offset is not None:
        out["offset"] = offset
    sal = frame.find_sal()
    if sal is not None and sal.symtab is not None:
        out["file"] = sal.symtab.filename
        if sal.line:
            out["line"] = sal.line
    if frame.type() == gdb.INLINE_FRAME:
        out["inlined"] = True
    return out


def _thread(thread, maps):
    """One thread's stack (the thread becomes the selected one), walked
    once: its last frame says why gdb's unwinding ended, if abnormally."""
    thread.switch()
    frames, note = [], None
    frame = last = gdb.newest_frame()
    while frame is not None:
        if len(frames) == MAX_FRAMES:
            note = f"stopped after {MAX_FRAMES} frames"
            break
        frames.append(_frame(frame, maps))
        last = frame
        try:
            frame = frame.older()
        except gdb.error as e:
            note = f"gdb could not unwind further: {e}"
            break
    if note is None:
        reason = last.unwind_stop_reason()
        if reason not in (gdb.FRAME_UNWIND_NO_REASON, gdb.FRAME_UNWIND_OUTERMOST):
            note = gdb.frame_stop_reason_string(reason)
    entry = {"tid": thread.ptid[1] or thread.num, "frames": frames}
    if thread.name:
        entry["name"] = thread.name
    if note:
        entry["note"] = note
    return entry


def stacks_json(inferior):
    """The JSON of every thread of `inferior` (the caller restores the
    selection afterwards)."""
    threads = sorted(inferior.threads(), key=lambda t: t.num)
    maps = _Maps()
    return json.dumps([_thread(t, maps) for t in threads]).encode("utf-8", "replace")


_MASK = (1 << 64) - 1
_INTEGERS = (gdb.TYPE_CODE_INT, gdb.TYPE_CODE_ENUM, gdb.TYPE_CODE_BOOL, gdb.TYPE_CODE_CHAR)


# The registers a `$` name may ask for, by gdb's name for them: `sp` and
# `pc` in any architecture, the general registers of x86-64.
_REGISTERS = {
    "sp": "sp",
    "pc": "pc",
    "rsp": "rsp",
    "rip": "rip",
    "rbx": "rbx",
    "rbp": "rbp",
    "r12": "r12",
    "r13": "r13",
    "r14": "r14",
    "r15": "r15",
    "rax": "rax",
    "rcx": "rcx",
    "rdx": "rdx",
    "rsi": "rsi",
    "rdi": "rdi",
    "r8": "r8",
    "r9": "r9",
    "r10": "r10",
    "r11": "r11",
}
# Caller-saved: gdb's DWARF unwinder takes a register the CFI does not
# mention as unchanged in the caller, which for these is wrong.
_CALLER_SAVED = frozenset(("rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11"))


def _restores_all(frame):
    """Whether `frame`'s registers are all known: it is the innermost
    concrete frame (only inlined frames are newer), or the frame a signal
    interrupted (the signal frame restores every register)."""
    newer = frame.newer()
    while newer is not None and newer.type() == gdb.INLINE_FRAME:
        newer = newer.newer()
    return newer is None or newer.type() == gdb.SIGTRAMP_FRAME


def _register(frame, name):
    """Register `$name` (`name` without the `$`) of `frame` as gdb's
    unwinder recovered it, as an unsigned 64-bit number; None: not a
    register asked for, not saved, unavailable, or a caller-saved one in a
    frame that does not restore it."""
    regname = _REGISTERS.get(name)
    if regname is None:
        return None
    try:
        if regname in _CALLER_SAVED and not _restores_all(frame):
            return None
        value = frame.read_register(regname)
        if value.is_optimized_out or getattr(value, "is_unavailable", False):
            return None  # <not saved>, <unavailable>
        return int(value.cast(gdb.lookup_type("unsigned long"))) & _MASK
    except (gdb.error, ValueError, RuntimeError):
        return None


def frame_value(inferior, tid, index, name):
    """The value of `name` in frame `index` (counted as `_thread` lists
    them: inlined frames too) of the thread whose tid is `tid`, as an
    unsigned 64-bit number (integers sign-extended, pointers as they are);
    None: no such thread, frame or name, optimised out, or not a number.
    A name starting with `$` is a register of that frame (`$sp`, `$pc`,
    `$rbx`, ...: `_register`); an inlined frame has the registers of the
    frame it is inlined into, as gdb gives them.
    The thread becomes the selected one (the caller restores the selection)."""
    thread = next((t for t in inferior.threads() if (t.ptid[1] or t.num) == tid), None)
    if thread is None:
        return None
    thread.switch()
    frame = gdb.newest_frame()
    for _ in range(index):
        if frame is None:
            return None
        frame = frame.older()
    if frame is None:
        return None
    if name.startswith("$"):
        return _register(frame, name[1:])
    try:
        value = frame.read_var(name)
    except ValueError:  # no such variable in this frame
        return None
    if value.is_optimized_out:
        return None
    code = value.type.strip_typedefs().code
    if code == gdb.TYPE_CODE_PTR:
        return int(value.cast(gdb.lookup_type("unsigned long"))) & _MASK
    if code in _INTEGERS:
        return int(value) & _MASK
    return None
