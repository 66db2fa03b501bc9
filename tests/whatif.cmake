# The what-if panel in headless Chromium: one entry per part of the panel
# (tests/whatif_browser.py); each skips (77) without Chromium or the
# in-page simulator.
foreach(part panel critical drag diff idle packing)
  add_test(NAME test_whatif_${part}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/browser_part.sh whatif $<TARGET_FILE:kaiten_cli> ${part})
  set_tests_properties(test_whatif_${part} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
