# What a user sees of a training run, in headless Chromium: one entry per
# part of tests/users_browser.py; each skips (77) without Chromium or the
# in-page simulator.
foreach(part report serve live memory gantt)
  add_test(NAME test_users_${part}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/browser_part.sh users $<TARGET_FILE:kaiten_cli> ${part})
  set_tests_properties(test_users_${part} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
