# Transport hand-off and doorbell tests are thread tests: `make tsan` runs them.
set_tests_properties(test_transport test_threads_allreduce test_doorbell test_inbox PROPERTIES
  LABELS threads)
