#!/bin/sh
# CMake's compiler and link launcher for the kaiten front (CMakeLists.txt,
# KT_MUSL_FRONT): runs the same compile or link with musl-gcc, the GCC
# wrapper that builds against musl instead of glibc. CMake passes the
# compiler it found as the first argument; it is replaced.
shift
exec musl-gcc "$@"
