# The dashboard server: its threads also run under TSan (make tsan); the
# browser test skips (77) where Chromium is missing.
set_tests_properties(test_serve test_serve_cli PROPERTIES LABELS threads)
set_tests_properties(test_serve_browser PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
set_tests_properties(test_serve_cli PROPERTIES SKIP_RETURN_CODE 77)
