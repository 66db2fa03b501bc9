# The musl front's own allocator and memcpy (src/cli/front_libc.c), checked
# in a program built the way the front is: with musl-gcc, static, beside
# front_libc.c. Only where the front is linked against musl.
if(KT_FRONT_LIBC STREQUAL "musl")
  add_executable(test_front_libc front_libc_check.c ${CMAKE_SOURCE_DIR}/src/cli/front_libc.c)
  set_target_properties(test_front_libc PROPERTIES
    C_COMPILER_LAUNCHER ${CMAKE_SOURCE_DIR}/scripts/musl-cc.sh
    RULE_LAUNCH_LINK ${CMAKE_SOURCE_DIR}/scripts/musl-cc.sh)
  # the calls under test must reach the replacements, not the compiler's
  # idea of them
  target_compile_options(test_front_libc PRIVATE -fno-builtin -fno-tree-loop-distribute-patterns)
  target_link_options(test_front_libc PRIVATE -static)
  add_test(NAME test_front_libc COMMAND test_front_libc)
  set_tests_properties(test_front_libc PROPERTIES TIMEOUT 120)
endif()
