# The Python package (python/kaiten, ctypes over libkaiten_ffi.so): its API
# against the CLI on a grid, and `pip install ./python` into a fresh venv
# followed by the README's example. Both skip (77) in sanitizer builds: an
# instrumented library does not load into an uninstrumented interpreter.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND AND KT_SHARED)
  add_test(NAME test_python_api COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/python/test_api.py)
  set_tests_properties(test_python_api PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS python
    ENVIRONMENT "PYTHONPATH=${CMAKE_SOURCE_DIR}/python;KAITEN_LIB_DIR=$<TARGET_FILE_DIR:kaiten_ffi_shared>;KT_CLI=$<TARGET_FILE:kaiten_cli>;KT_TEST_DATA=${CMAKE_SOURCE_DIR}/tests/data;KT_SANITIZE=${KT_SANITIZE}")
  add_test(NAME test_python_edges COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/python/test_edges.py)
  set_tests_properties(test_python_edges PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS python
    ENVIRONMENT "PYTHONPATH=${CMAKE_SOURCE_DIR}/python;KAITEN_LIB_DIR=$<TARGET_FILE_DIR:kaiten_ffi_shared>;KT_SANITIZE=${KT_SANITIZE}")
  add_test(NAME test_torch_varlen COMMAND bash ${CMAKE_SOURCE_DIR}/tests/python/test_torch_varlen.sh)
  set_tests_properties(test_torch_varlen PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS python
    ENVIRONMENT "PYTHONPATH=${CMAKE_SOURCE_DIR}/python;KAITEN_LIB_DIR=$<TARGET_FILE_DIR:kaiten_ffi_shared>;KT_SANITIZE=${KT_SANITIZE}")
  add_test(NAME test_python_install COMMAND bash ${CMAKE_SOURCE_DIR}/tests/python/test_install.sh
    ${Python3_EXECUTABLE} ${CMAKE_BINARY_DIR}/python-wheel)
  set_tests_properties(test_python_install PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS python
    ENVIRONMENT "KT_SOURCE=${CMAKE_SOURCE_DIR};KT_SANITIZE=${KT_SANITIZE}")
endif()
# kaiten.torch under torch.distributed: one rank's error on every rank.
# Needs torch: the venv of scripts/torch-oracle.sh ($KAITEN_TORCH_VENV), else skips.
if(KT_SHARED)
  set(KT_TORCH_VENV "$ENV{KAITEN_TORCH_VENV}")
  if(NOT KT_TORCH_VENV)
    set(KT_TORCH_VENV "$ENV{HOME}/.cache/kaiten-torch-oracle")
  endif()
  if(EXISTS "${KT_TORCH_VENV}/bin/python")
    add_test(NAME test_torch_errors COMMAND ${KT_TORCH_VENV}/bin/python
             ${CMAKE_SOURCE_DIR}/tests/python/test_torch_errors.py)
    set_tests_properties(test_torch_errors PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS python
      ENVIRONMENT "PYTHONPATH=${CMAKE_SOURCE_DIR}/python;KAITEN_LIB_DIR=$<TARGET_FILE_DIR:kaiten_ffi_shared>;KT_SANITIZE=${KT_SANITIZE}")
  endif()
endif()
