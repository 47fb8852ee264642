# The pre-tokenizer checked against a real regex engine: tests/pretok_check.py runs DeepSeek's
# tokenizer.json split patterns (deepseek-llm and deepseek-v3) with Python's `regex` module and
# compares the pieces with latte's (tests/pretok/pretok_tool.cpp) on hand-picked and random strings.
# Without a python3 that has `regex` (Debian: python3-regex) the test is reported as skipped.
#
# Included from CMakeLists.txt inside if(LATTE_BUILD_TESTS).

add_executable(latte-pretok tests/pretok/pretok_tool.cpp)
target_link_libraries(latte-pretok PRIVATE latte)

if(NOT DEFINED LATTE_REGEX_PYTHON)
  set(LATTE_REGEX_PYTHON "")
  foreach(_cand /usr/bin/python3 python3)
    execute_process(COMMAND ${_cand} -c "import regex" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc STREQUAL "0")
      set(LATTE_REGEX_PYTHON ${_cand})
      break()
    endif()
  endforeach()
  set(LATTE_REGEX_PYTHON "${LATTE_REGEX_PYTHON}" CACHE STRING "python3 with the regex module for the pre-tokenizer test")
endif()
if(LATTE_REGEX_PYTHON)
  set(_py ${LATTE_REGEX_PYTHON})
else()
  message(STATUS "latte: no python3 with the regex module: the pre-tokenizer test will be skipped (apt-get install python3-regex)")
  set(_py python3)  # the script exits 77 (skipped) when it cannot import regex
endif()
add_test(NAME pretok_vs_python_regex
         COMMAND ${_py} ${PROJECT_SOURCE_DIR}/tests/pretok_check.py $<TARGET_FILE:latte-pretok> --n 4000)
set_tests_properties(pretok_vs_python_regex PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
