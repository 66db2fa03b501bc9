# kaiten's simulator for the page (included by the top CMakeLists.txt):
# the core layer's schedule, generator and simulator code, the simulation
# JSON writer (src/report/json.c) and src/web, compiled to WebAssembly with
# clang for wasm32-wasi (Debian: clang, lld, wasi-libc,
# libclang-rt-dev-wasm32; scripts/deps.sh installs them). The module is
# built from the sources on every build that changes them, so it is never
# stale, and compiled into the report layer as bytes (kt__wasm) that every
# page carries in base64url. Without the toolchain the bytes are empty and
# the pages say the what-if panel needs it.
option(KT_WASM "build the in-page simulator (clang for wasm32-wasi)" ON)
set(KT_WASM_OUT ${CMAKE_CURRENT_BINARY_DIR}/web/kaiten.wasm)
set(KT_WASM_EMBED ${CMAKE_CURRENT_BINARY_DIR}/embed/kt__wasm.c)
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/web ${CMAKE_CURRENT_BINARY_DIR}/embed)

# natively the web module is part of the report layer (tests call it)
file(GLOB KT_WEB_SOURCES CONFIGURE_DEPENDS src/web/*.c)
list(REMOVE_ITEM KT_WEB_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/src/web/wasm.c)
list(APPEND KT_report_SOURCES ${KT_WEB_SOURCES} ${KT_WASM_EMBED})

set(KT_WASM_OK OFF)
if(KT_WASM)
  find_program(KT_WASM_CC NAMES clang clang-18 clang-17 clang-16 clang-15 clang-14)
  if(KT_WASM_CC)
    set(probe ${CMAKE_CURRENT_BINARY_DIR}/web/probe.c)
    file(WRITE ${probe} "#include <stdlib.h>\nvoid *kt_probe(size_t n) { return malloc(n); }\n")
    execute_process(COMMAND ${KT_WASM_CC} --target=wasm32-wasi -mexec-model=reactor -O2
                            -o ${CMAKE_CURRENT_BINARY_DIR}/web/probe.wasm ${probe}
                    RESULT_VARIABLE probe_rc OUTPUT_QUIET ERROR_QUIET)
    if(probe_rc EQUAL 0)
      set(KT_WASM_OK ON)
    endif()
  endif()
  if(NOT KT_WASM_OK)
    message(WARNING "kaiten: no clang for wasm32-wasi (clang, lld, wasi-libc, "
                    "libclang-rt-dev-wasm32): reports are built without the in-page simulator "
                    "and its tests skip; scripts/deps.sh installs them")
  endif()
endif()

if(KT_WASM_OK)
  set(KT_WASM_SOURCES ${KT_core_SOURCES})
  list(FILTER KT_WASM_SOURCES EXCLUDE REGEX "/src/plan/|/src/core/(output|dl)\\.c$|/src/sim/size\\.c$")
  list(APPEND KT_WASM_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/src/report/json.c ${KT_WEB_SOURCES}
       ${CMAKE_CURRENT_SOURCE_DIR}/src/web/wasm.c)
  file(GLOB KT_WASM_HEADERS CONFIGURE_DEPENDS include/kaiten/*.h src/*/*.h)
  set(KT_WASM_FLAGS --target=wasm32-wasi -mexec-model=reactor -std=c11 -Os -fno-math-errno
      -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes
      -Wmissing-prototypes -Wvla -Wfloat-conversion
      -I${CMAKE_CURRENT_SOURCE_DIR}/include -I${CMAKE_CURRENT_SOURCE_DIR}/src
      -Wl,--gc-sections -Wl,--strip-all)
  if(KT_WERROR)
    list(APPEND KT_WASM_FLAGS -Werror)
  endif()
  add_custom_command(OUTPUT ${KT_WASM_OUT}
    COMMAND ${KT_WASM_CC} ${KT_WASM_FLAGS} -o ${KT_WASM_OUT} ${KT_WASM_SOURCES}
    DEPENDS ${KT_WASM_SOURCES} ${KT_WASM_HEADERS}
    COMMENT "Building the in-page simulator (web/kaiten.wasm)" VERBATIM)
  add_custom_command(OUTPUT ${KT_WASM_EMBED}
    COMMAND ${CMAKE_COMMAND} -DSRC=${KT_WASM_OUT} -DOUT=${KT_WASM_EMBED}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/embed_bin.cmake
    DEPENDS ${KT_WASM_OUT} scripts/embed_bin.cmake VERBATIM)
else()
  add_custom_command(OUTPUT ${KT_WASM_EMBED}
    COMMAND ${CMAKE_COMMAND} -DSRC= -DOUT=${KT_WASM_EMBED}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/embed_bin.cmake
    DEPENDS scripts/embed_bin.cmake VERBATIM)
endif()
