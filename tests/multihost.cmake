# Emulated hosts (network namespaces, rate-limited links) under MPI: root only.
if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
  # RUN_SERIAL: its step times are measured, and another test on the same
  # two cores would be part of them
  set_tests_properties(test_multihost PROPERTIES LABELS multihost TIMEOUT 180 RUN_SERIAL TRUE ENVIRONMENT
    "ASAN_OPTIONS=detect_leaks=0;KT_MPIEXEC=${MPIEXEC_EXECUTABLE};KT_SOURCE=${CMAKE_SOURCE_DIR}")
endif()
if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
  set_tests_properties(test_idle_comm PROPERTIES LABELS multihost TIMEOUT 180 RUN_SERIAL TRUE ENVIRONMENT
    "ASAN_OPTIONS=detect_leaks=0;KT_MPIEXEC=${MPIEXEC_EXECUTABLE};KT_SOURCE=${CMAKE_SOURCE_DIR}")
endif()
