# The thread-runtime tests run under ThreadSanitizer with `make tsan` (-L threads).
set_tests_properties(test_replan test_runtime test_gpt_runtime test_gpt_fused test_post_validation test_train_cli
                     test_sim_threads test_sim_par test_slow_rank test_idle_split PROPERTIES LABELS threads)
# test_train_cli compares measured synthetic timings with the simulator: it
# runs alone so other tests do not steal its cores.
set_tests_properties(test_train_cli PROPERTIES RUN_SERIAL TRUE)
