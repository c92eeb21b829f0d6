"""Every thread's call stack of one inferior, from gdb's own unwinder, as the
JSON libmpiq reads (docs/json-schema.md, "Thread stack")."""

import json

import gdb

MAX_FRAMES = 256


def _frame(frame):
    pc = frame.pc()
    out = {"pc": f"{pc:#x}"}
    name = frame.name()
    if name:
        out["function"] = name
    try:
        objfile = gdb.solib_name(pc) or (frame.function() and frame.function().symtab.objfile.filename)
    except gdb.error:
        objfile = None
    if not objfile:
        progspace = gdb.current_progspace()
        block_objfile = progspace.objfile_for_address(pc) if hasattr(progspace, "objfile_for_address") else None
        objfile = block_objfile.filename if block_objfile else None
    if objfile:
        out["object"] = objfile
    sal = frame.find_sal()
    if sal is not None and sal.symtab is not None:
        out["file"] = sal.symtab.filename
        if sal.line:
            out["line"] = sal.line
    if frame.type() == gdb.INLINE_FRAME:
        out["inlined"] = True
    return out


def _thread(thread):
    """One thread's stack (the thread becomes the selected one)."""
    thread.switch()
    frames, note = [], None
    frame = gdb.newest_frame()
    while frame is not None:
        if len(frames) == MAX_FRAMES:
            note = f"stopped after {MAX_FRAMES} frames"
            break
        frames.append(_frame(frame))
        try:
            frame = frame.older()
        except gdb.error as e:
            note = f"gdb could not unwind further: {e}"
            break
    if note is None:
        reason = gdb.newest_frame() and frames and _stop_reason(thread)
        if reason:
            note = reason
    entry = {"tid": thread.ptid[1] or thread.num, "frames": frames}
    if thread.name:
        entry["name"] = thread.name
    if note:
        entry["note"] = note
    return entry


def _stop_reason(thread):
    """Why gdb's unwinding of the selected thread ended, if not normally."""
    frame = gdb.newest_frame()
    last = frame
    while frame is not None:
        last = frame
        frame = frame.older()
    reason = last.unwind_stop_reason()
    if reason in (gdb.FRAME_UNWIND_NO_REASON, gdb.FRAME_UNWIND_OUTERMOST):
        return None
    return gdb.frame_stop_reason_string(reason)


def stacks_json(inferior):
    """The JSON of every thread of `inferior` (the caller restores the
    selection afterwards)."""
    threads = sorted(inferior.threads(), key=lambda t: t.num)
    return json.dumps([_thread(t) for t in threads]).encode("utf-8", "replace")
