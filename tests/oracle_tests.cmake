# The converter's tests: tools/convert_hf_to_gguf.py turns each committed transformers checkpoint
# under tests/data/oracle/NAME/ into the GGUF files committed beside it, byte for byte (the C++
# oracle tests in tests/test_oracle.cpp then check those files' logits against transformers').
#
# Included from CMakeLists.txt (inside if(LATTE_BUILD_TESTS)); the tests it adds run this same file
# as a script (cmake -P) to convert and compare. The converter needs python3 with numpy (Debian:
# python3-numpy); without one the tests are reported as skipped.

if(CMAKE_SCRIPT_MODE_FILE)
  # ---- script mode: -DPYTHON= -DCONVERTER= -DSRC= -DOUTTYPE= -DEXTRA= -DEXPECTED= -DOUT= ----------
  get_filename_component(_dir "${OUT}" DIRECTORY)
  file(MAKE_DIRECTORY "${_dir}")
  separate_arguments(_extra UNIX_COMMAND "${EXTRA}")
  execute_process(COMMAND "${PYTHON}" "${CONVERTER}" "${SRC}" -o "${OUT}" --outtype ${OUTTYPE} ${_extra}
                  RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "convert_hf_to_gguf.py failed (${_rc}) on ${SRC}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${OUT}" "${EXPECTED}" RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    file(SIZE "${OUT}" _a)
    file(SIZE "${EXPECTED}" _b)
    message(FATAL_ERROR "${OUT} (${_a} bytes) differs from the committed ${EXPECTED} (${_b} bytes)")
  endif()
  message("ok: ${SRC} --outtype ${OUTTYPE} ${EXTRA} gives ${EXPECTED} byte for byte")
  return()
endif()

# ---- include mode: find a python3 that has numpy, add one test per committed GGUF -------------
if(NOT DEFINED LATTE_ORACLE_PYTHON)
  set(LATTE_ORACLE_PYTHON "")
  foreach(_cand /usr/bin/python3 python3)
    execute_process(COMMAND ${_cand} -c "import numpy" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc STREQUAL "0")
      set(LATTE_ORACLE_PYTHON ${_cand})
      break()
    endif()
  endforeach()
  set(LATTE_ORACLE_PYTHON "${LATTE_ORACLE_PYTHON}" CACHE STRING "python3 with numpy for the converter tests")
endif()
if(NOT LATTE_ORACLE_PYTHON)
  message(STATUS "latte: no python3 with numpy: the converter tests will be skipped (apt-get install python3-numpy)")
endif()

file(GLOB _oracle_fixtures LIST_DIRECTORIES true ${PROJECT_SOURCE_DIR}/tests/data/oracle/*)
foreach(_fx ${_oracle_fixtures})
  if(NOT EXISTS ${_fx}/config.json OR NOT EXISTS ${_fx}/model.safetensors)  # v2_group_limited: GGUF only
    continue()
  endif()
  get_filename_component(_name ${_fx} NAME)
  # model-<type>.gguf: plain conversion; model-splitkvb-<type>.gguf: with --split-kv-b.
  file(GLOB _ggufs ${_fx}/model-*.gguf)
  foreach(_g ${_ggufs})
    get_filename_component(_gname ${_g} NAME_WE)
    string(REGEX REPLACE "^model-" "" _variant ${_gname})
    set(_extra "")
    if(_variant MATCHES "^splitkvb-")
      set(_extra "--split-kv-b")
      string(REGEX REPLACE "^splitkvb-" "" _type ${_variant})
    else()
      set(_type ${_variant})
    endif()
    set(_test oracle_convert_${_name}_${_variant})
    if(NOT LATTE_ORACLE_PYTHON)
      add_test(NAME ${_test} COMMAND sh -c "echo 'skipped: no python3 with numpy (apt-get install python3-numpy)'; exit 77")
      set_tests_properties(${_test} PROPERTIES SKIP_RETURN_CODE 77)
      continue()
    endif()
    add_test(NAME ${_test}
             COMMAND ${CMAKE_COMMAND}
               -DPYTHON=${LATTE_ORACLE_PYTHON}
               -DCONVERTER=${PROJECT_SOURCE_DIR}/tools/convert_hf_to_gguf.py
               -DSRC=${_fx} -DOUTTYPE=${_type} "-DEXTRA=${_extra} -q"
               -DEXPECTED=${_g}
               -DOUT=${CMAKE_BINARY_DIR}/oracle-convert/${_name}/${_gname}.gguf
               -P ${PROJECT_SOURCE_DIR}/tests/oracle_tests.cmake)
    set_tests_properties(${_test} PROPERTIES TIMEOUT 300)
  endforeach()
endforeach()
