"""mpiq for gdb, as a package: `gdb-python/mpiq.py` puts this package's
directory on sys.path, imports `mpiq_gdb.commands` and registers the commands.

    capi      mpiq.h for ctypes (no gdb: the C API copy check imports it)
    library   finding and loading libmpiq.so
    lookups   symbol and type lookups in gdb, cached across dumps
    target    struct mpiq_target for one inferior: the callbacks
    dump      one `info mpi-queues`: types, Ctrl-C, what is restored after
    options   the shim's own part of the command line (--inferiors)
    commands  `info mpi-queues`, `set/show mpi dll-path`

This file imports nothing, so `import mpiq_gdb.capi` works outside gdb.
"""
