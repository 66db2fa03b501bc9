# The dashboard server: its threads also run under TSan (make tsan); the
# browser test skips (77) where Chromium is missing.
set_tests_properties(test_serve test_serve_cli PROPERTIES LABELS threads)
set_tests_properties(test_serve_browser PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
set_tests_properties(test_serve_cli PROPERTIES SKIP_RETURN_CODE 77)
# Issue 35's sections: serve under attack (1), readers on extreme input (2),
# the live page's latest step (5). Loopback only; they skip without python3.
set_tests_properties(test_serve_attacks test_readers test_serve_latest PROPERTIES
  SKIP_RETURN_CODE 77 TIMEOUT 300)
set_tests_properties(test_serve_attacks test_serve_latest PROPERTIES LABELS threads)
