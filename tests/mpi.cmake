# MPI tests run through CMake's FindMPI mpiexec, as root and oversubscribed.
if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
  set_tests_properties(test_mpi PROPERTIES TIMEOUT 600 ENVIRONMENT
    "KT_MPIEXEC=${MPIEXEC_EXECUTABLE};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;KT_TEST_DATA=${CMAKE_SOURCE_DIR}/tests/data")
endif()
