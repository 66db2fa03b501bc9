# The thread-runtime tests run under ThreadSanitizer with `make tsan` (-L threads).
set_tests_properties(test_runtime test_train_cli PROPERTIES LABELS threads)
