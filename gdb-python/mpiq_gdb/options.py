"""The shim's own part of `info mpi-queues`'s command line: --targets (or
its other spellings --inferiors, --target) is handled here (it picks gdb
inferiors); everything else goes to mpiq_dump, which parses it for every
front end. The usage line and the flags that take a value come from the
library's option table, through mpiq_help()."""

import re

import gdb

from .capi import parse_targets
from .library import library

# The spellings of the option that picks inferiors: the bridge's table's
# --targets (the same name as in lldb) and its other spellings.
TARGETS_FLAGS = ("--targets", "--inferiors", "--target")

# The first paragraph of mpiq_help() is the usage line without the command.
_ARGUMENTS = "Arguments: "
# One item of it: [--flag] or [--flag VALUE], `...` when repeatable.
_ITEM = re.compile(r"\[(--[A-Za-z0-9-]+)( [^\]]+)?\](?:\.\.\.)?")
# Flags that take a value when mpiq_help() cannot be read.
_VALUED_FALLBACK = ("--comm", "--queue", "--dll", "--record", "--timeout") + TARGETS_FLAGS


def usage_and_body(help_text, command):
    """(usage line of `command`, the rest of mpiq_help()'s text): the usage
    line made from mpiq_help()'s first paragraph, wrapped."""
    if not help_text.startswith(_ARGUMENTS):
        return f"Usage: {command} [OPTIONS]", help_text
    first, _, body = help_text.partition("\n\n")
    items = [m.group(0) for m in _ITEM.finditer(first)]
    lead = f"Usage: {command} "
    lines, line = [], lead
    for item in items:
        if len(line) > len(lead) and len(line) + len(item) > 79:
            lines.append(line.rstrip())
            line = " " * len(lead)
        line += item + " "
    lines.append(line.rstrip())
    return "\n".join(lines), body


def valued_flags(help_text):
    """The flags that take a value, from mpiq_help()'s usage line, plus
    --targets' spellings."""
    first = help_text.partition("\n\n")[0] if help_text.startswith(_ARGUMENTS) else ""
    valued = tuple(m.group(1) for m in _ITEM.finditer(first) if m.group(2))
    return (valued + TARGETS_FLAGS) if valued else _VALUED_FALLBACK


def split_words(line):
    """(start, end, word) for each word, split as mpiq_dump splits its
    arguments: on white space, quotes group, a backslash escapes."""
    words = []
    i, n = 0, len(line)
    while i < n:
        if line[i].isspace():
            i += 1
            continue
        start, chars, quote = i, [], None
        while i < n:
            c = line[i]
            if c == "\\":
                i += 1
                if i < n:
                    chars.append(line[i])
            elif quote is not None:
                if c == quote:
                    quote = None
                else:
                    chars.append(c)
            elif c in "'\"":
                quote = c
            elif c.isspace():
                break
            else:
                chars.append(c)
            i += 1
        words.append((start, i, "".join(chars)))
    return words


def quote(word):
    """word quoted for split_words."""
    return "'" + word.replace("\\", "\\\\").replace("'", "\\'") + "'"


def parse_args(line, valued=_VALUED_FALLBACK):
    """Splits off what the shim handles. Returns (rest of the line for
    mpiq_dump, (spelling, value) of --targets or None, --help given, --dll
    given). `valued`: the flags that take a value (`--flag VALUE` or
    `--flag=VALUE`), see valued_flags()."""
    words = split_words(line)
    spec, cut, wants_help, has_dll = None, [], False, False
    k = 0
    while k < len(words):
        start, end, word = words[k]
        flag, eq, value = word.partition("=")
        if not flag.startswith("--"):
            flag, eq = word, ""
        if word in ("--help", "-h"):
            wants_help = True
        if flag == "--dll":
            has_dll = True
        if flag in valued and not eq:
            k += 1  # the next word is this flag's value
            if k < len(words):
                value, end = words[k][2], words[k][1]
            else:
                value = ""
        if flag in TARGETS_FLAGS:
            if not value:
                raise gdb.GdbError(f"{flag} needs a value: all, or inferior numbers like 1,3")
            spec = (flag, value)
            cut.append((start, end))
        k += 1
    for start, end in reversed(cut):
        line = line[:start] + line[end:]
    return line.strip(), spec, wants_help, has_dll


def select_inferiors(spec):
    """The inferiors --targets names (default: the current one), checked.
    `spec`: (spelling, value) from parse_args, or None."""
    flag, spec = spec if spec is not None else ("--targets", None)
    names = None
    if spec is not None:
        try:
            names = parse_targets(library(), spec)
        except ValueError as e:
            raise gdb.GdbError(str(e))
    if names is None:
        chosen, skip_empty = [gdb.selected_inferior()], False
    elif names == "all":
        chosen, skip_empty = sorted(gdb.inferiors(), key=lambda i: i.num), True
    else:
        by_num = {i.num: i for i in gdb.inferiors()}
        chosen, skip_empty = [], False
        for num in names:
            if num not in by_num:
                raise gdb.GdbError(f"{flag}: no inferior {num} (see `info inferiors`)")
            chosen.append(by_num[num])
    several = len(chosen) > 1 or spec is not None
    result = []
    for inf in chosen:
        where = f"inferior {inf.num}: " if several else ""
        threads = inf.threads() if inf.is_valid() else ()
        if not threads:
            if skip_empty:
                continue
            raise gdb.GdbError(f"{where}no process: run, attach or load a core file")
        if any(t.is_running() for t in threads):
            raise gdb.GdbError(f"{where}the process is running; interrupt it first")
        thread = gdb.selected_thread()
        if thread is None or thread.inferior.num != inf.num:
            thread = min(threads, key=lambda t: t.num)
        result.append((inf, thread))
    if not result:
        raise gdb.GdbError("no inferior has a process: run, attach or load a core file")
    return result
