# MPI tests run through CMake's FindMPI mpiexec, as root and oversubscribed.
# Under ASan, LeakSanitizer would report OpenMPI's own allocations (libmpi and
# its dlopen'ed components keep them until exit), so leak checking is off for
# this test only; kaiten's code paths are leak-checked by the threads tests.
if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
  set_tests_properties(test_autopilot test_mpi test_program_order test_train_safety test_live_view test_idle_straggler test_stop_signals test_step_sync PROPERTIES TIMEOUT 600 ENVIRONMENT
    "ASAN_OPTIONS=detect_leaks=0;KT_MPIEXEC=${MPIEXEC_EXECUTABLE};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;KT_TEST_DATA=${CMAKE_SOURCE_DIR}/tests/data")
endif()
# test_step_sync trains 15 runs of 50 steps; under ASan on a slow shared host
# that has taken 510-570 s, too close to the 600 s above.
if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE AND KT_SANITIZE)
  set_tests_properties(test_step_sync PROPERTIES TIMEOUT 1500)
endif()
