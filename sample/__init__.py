"""Sample toolchain: stand-ins for superpmi, mcs, pin, JIT binaries, corerun and the shim collector.

The modules in this package only use the standard library and never import
anything from the surrounding script suite, so a generated toolchain can carry
a copy of this package in its own ``lib`` directory.
"""
