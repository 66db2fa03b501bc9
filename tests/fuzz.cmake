# Fuzz targets (tests/fuzz/README.md). Every harness is linked with
# replay_main.c, and CTest replays its committed corpus; with -DKT_FUZZ=ON
# (clang) it is also linked with libFuzzer as fuzz_<target> for `make fuzz`.
set(KT_FUZZ_TARGETS schedule config_json checkpoint cli rundir http ffi)
# An input of a committed corpus must replay well within libFuzzer's 10 s
# hang limit of `make fuzz` (issue 35: a shipped `compare -p44` took 60 s
# there): 1 s each in an optimised build, 10 s in a sanitised one.
if(KT_SANITIZE OR CMAKE_BUILD_TYPE STREQUAL "Debug")
  set(KT_REPLAY_MAX_SECONDS 10)
else()
  set(KT_REPLAY_MAX_SECONDS 1)
endif()
foreach(t ${KT_FUZZ_TARGETS})
  set(harness ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_${t}.c)
  set(lib kaiten)
  if(t STREQUAL "cli")
    set(lib kaiten_commands)
  endif()
  add_executable(replay_${t} ${harness} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay_main.c)
  target_include_directories(replay_${t} PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_compile_options(replay_${t} PRIVATE -UNDEBUG)
  target_link_libraries(replay_${t} PRIVATE ${lib})
  add_test(NAME fuzz_replay_${t} COMMAND replay_${t} --max-seconds ${KT_REPLAY_MAX_SECONDS}
           ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${t})
  set_tests_properties(fuzz_replay_${t} PROPERTIES TIMEOUT 120 LABELS fuzz)
  if(KT_FUZZ)
    add_executable(fuzz_${t} ${harness})
    target_include_directories(fuzz_${t} PRIVATE ${CMAKE_SOURCE_DIR}/src)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(fuzz_${t} PRIVATE ${lib})
  endif()
endforeach()
