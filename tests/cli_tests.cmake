# latte-cli behaviour tests (included from CMakeLists.txt inside the tests block).
# Every test runs the CLI through `sh -c` so that both the exit code and the output are checked
# (CTest's PASS_REGULAR_EXPRESSION alone would ignore the exit code).

set(_latte_cli $<TARGET_FILE:latte-cli>)

# sh -c script: $1 expected exit code, $2 "1" for an error case (stdout must be empty, stderr
# exactly one `latte-cli: error:` line), $3 the number N of extended regexes that follow, each of
# which the output (stdout+stderr) must match, then the command.
set(_latte_cli_check [=[
want=$1 errcase=$2 n=$3
shift 3
res=""
while [ "$n" -gt 0 ]; do res="$res$1
"; shift; n=$((n - 1)); done
out=$("$@" 2>"${TMPDIR:-/tmp}/latte-cli-test.$$.err")
rc=$?
err=$(cat "${TMPDIR:-/tmp}/latte-cli-test.$$.err")
rm -f "${TMPDIR:-/tmp}/latte-cli-test.$$.err"
printf 'exit code: %s\n--- stdout\n%s\n--- stderr\n%s\n' "$rc" "$out" "$err"
if [ "$rc" -ne "$want" ]; then echo "FAIL: exit code $rc, expected $want"; exit 1; fi
fail=0
while IFS= read -r re; do
  [ -n "$re" ] || continue
  if ! printf '%s\n%s\n' "$out" "$err" | grep -Eq -e "$re"; then echo "FAIL: output does not match /$re/"; fail=1; fi
done <<EOF_RE
$res
EOF_RE
[ "$fail" = 0 ] || exit 1
if [ "$errcase" = 1 ]; then
  if [ -n "$out" ]; then echo "FAIL: an error must not write to stdout"; exit 1; fi
  if [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ]; then echo "FAIL: expected one line on stderr"; exit 1; fi
  case "$err" in "latte-cli: error: "*) ;; *) echo "FAIL: stderr must start with 'latte-cli: error: '"; exit 1;; esac
fi
echo PASS
]=])

# latte_cli_test(NAME <name> RC <code> MATCH <regex>... [ERROR] [TIMEOUT <s>] ARGS <cli args>...)
function(latte_cli_test)
  cmake_parse_arguments(T "ERROR" "NAME;RC;TIMEOUT" "MATCH;ARGS" ${ARGN})
  list(LENGTH T_MATCH _n)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 20)
  endif()
  if(T_ERROR)
    set(_err 1)
  else()
    set(_err 0)
  endif()
  add_test(NAME ${T_NAME}
           COMMAND sh -c "${_latte_cli_check}" sh ${T_RC} ${_err} ${_n} ${T_MATCH} ${_latte_cli} ${T_ARGS}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS cli)
endfunction()

# ---- the command line --------------------------------------------------------------------------
latte_cli_test(NAME cli_help RC 0 MATCH "-mla, --mla-use" ARGS --help)
latte_cli_test(NAME cli_help_short RC 0 MATCH "--ctx-size N.*default: 4096" ARGS -h)
latte_cli_test(NAME cli_unknown_flag RC 2 ERROR MATCH "error: .*--bogus" ARGS -m x --bogus)
latte_cli_test(NAME cli_missing_model RC 2 ERROR MATCH "error: .*-m" ARGS -p Hello)
latte_cli_test(NAME cli_missing_value RC 2 ERROR MATCH "error: -n: missing value" ARGS -m x -n)
latte_cli_test(NAME cli_bad_number RC 2 ERROR MATCH "error: -n: .*'abc'" "integer" ARGS -m x -n abc)
latte_cli_test(NAME cli_number_trailing_junk RC 2 ERROR MATCH "error: -t: .*'2x'" ARGS -m x -t 2x)
latte_cli_test(NAME cli_number_out_of_range RC 2 ERROR MATCH "error: -c: .*'0'.*out of range" ARGS -m x -c 0)
latte_cli_test(NAME cli_bad_float RC 2 ERROR MATCH "error: --top-p: .*'1.5'" ARGS -m x --top-p 1.5)
latte_cli_test(NAME cli_bad_mla RC 2 ERROR MATCH "error: -mla: .*'7'" "0, 1, 2, 3" ARGS -m x -mla 7)
latte_cli_test(NAME cli_bad_cache_type RC 2 ERROR MATCH "error: -ctk: .*'q9'" "f32, f16, bf16, q8_0" ARGS -m x -ctk q9)
latte_cli_test(NAME cli_bad_flash_attn RC 2 ERROR MATCH "error: -fa: .*'maybe'" ARGS -m x -fa maybe)
latte_cli_test(NAME cli_prompt_and_tokens RC 2 ERROR MATCH "error: .*--tokens" ARGS -m x -p Hi --tokens 1,2)
latte_cli_test(NAME cli_bad_token_list RC 2 ERROR MATCH "error: --tokens: .*'1,,2'" ARGS -m x --tokens 1,,2)

# ---- model files that cannot be used -----------------------------------------------------------
latte_cli_test(NAME cli_missing_model_file RC 1 ERROR MATCH "error: .*/nonexistent/model\\.gguf"
               ARGS -m /nonexistent/model.gguf -p Hello)
latte_cli_test(NAME cli_not_gguf RC 1 ERROR MATCH "error: .*CMakeLists\\.txt"
               ARGS -m ${PROJECT_SOURCE_DIR}/CMakeLists.txt -p Hello)

# ---- the tiny model ----------------------------------------------------------------------------
latte_cli_test(NAME cli_tiny_greedy RC 0 TIMEOUT 120
               MATCH "^Hello" "prompt eval: [0-9]+ tokens, [0-9.]+ ms, [0-9.]+ tokens/s"
                     "^eval: [0-9]+ tokens, [0-9.]+ ms, [0-9.]+ tokens/s" "^load: [0-9.]+ ms"
                     "KV cache: [0-9]+ bytes \\(f16, mla 3"
               ARGS -m ${LATTE_TINY_MODEL} -p Hello -n 8 --temp 0 -t 2)
latte_cli_test(NAME cli_tiny_tokens RC 0 TIMEOUT 120 MATCH "eval: [0-9]+ tokens"
               ARGS -m ${LATTE_TINY_MODEL} --tokens 0,5,7 -n 4 --temp 0 -t 2)
latte_cli_test(NAME cli_tiny_token_out_of_range RC 2 ERROR TIMEOUT 60 MATCH "error: --tokens: .*999999"
               ARGS -m ${LATTE_TINY_MODEL} --tokens 999999)
latte_cli_test(NAME cli_tiny_context_full RC 0 TIMEOUT 120 MATCH "context full"
               ARGS -m ${LATTE_TINY_MODEL} -p Hello -n -1 -c 16 --temp 0 -t 2)
foreach(_mode 0 1 2)
  latte_cli_test(NAME cli_tiny_mla${_mode} RC 0 TIMEOUT 120 MATCH "mla ${_mode}"
                 ARGS -m ${LATTE_TINY_MODEL} -p Hello -n 4 --temp 0 -t 2 -mla ${_mode} -ctk q8_0)
  latte_cli_test(NAME cli_tiny_mla${_mode}_q8_KV RC 0 TIMEOUT 120 MATCH "q8_KV, mla ${_mode}"
                 ARGS -m ${LATTE_TINY_MODEL} -p Hello -n 4 --temp 0 -t 2 -mla ${_mode} -ctk q8_KV)
endforeach()

# Same command twice: identical stdout (greedy, and sampled with a fixed seed).
set(_latte_cli_twice [=[
a=$("$@" 2>/dev/null) || { echo "FAIL: first run exited $?"; exit 1; }
b=$("$@" 2>/dev/null) || { echo "FAIL: second run exited $?"; exit 1; }
printf -- '--- run 1\n%s\n--- run 2\n%s\n' "$a" "$b"
[ -n "$a" ] || { echo "FAIL: no output"; exit 1; }
[ "$a" = "$b" ] || { echo "FAIL: the two runs differ"; exit 1; }
echo PASS
]=])
add_test(NAME cli_tiny_deterministic_greedy
         COMMAND sh -c "${_latte_cli_twice}" sh ${_latte_cli} -m ${LATTE_TINY_MODEL} -p Hello -n 8 --temp 0 -t 2)
add_test(NAME cli_tiny_deterministic_seed
         COMMAND sh -c "${_latte_cli_twice}" sh ${_latte_cli} -m ${LATTE_TINY_MODEL} -p Hello -n 8 --temp 1 --seed 42 -t 2)
set_tests_properties(cli_tiny_deterministic_greedy cli_tiny_deterministic_seed PROPERTIES TIMEOUT 180 LABELS cli)

# ---- threads and loading (issue 4) -------------------------------------------------------------
latte_cli_test(NAME cli_bad_numa RC 2 ERROR MATCH "error: --numa: .*'spread'" "distribute, isolate, interleave" ARGS -m x --numa spread)
latte_cli_test(NAME cli_cpu_range_unavailable RC 1 MATCH "error: .*CPU 4000.*cannot run on"
               ARGS -m ${LATTE_TINY_MODEL} -p Hello -n 1 --cpu-range 4000)
latte_cli_test(NAME cli_bad_cpu_mask RC 1 MATCH "error: --cpu-mask 'xyz'" ARGS -m ${LATTE_TINY_MODEL} -p Hello -n 1 --cpu-mask xyz)
latte_cli_test(NAME cli_tiny_load_options RC 0 TIMEOUT 120
               MATCH "^Hello" "load: .*49 tensors" "load: huge pages [0-9.]+ MiB, locked" "threads: 1 of 1 CPUs"
               ARGS -m ${LATTE_TINY_MODEL} -p Hello -n 4 --temp 0 --no-mmap --populate --cpu-range 0 --numa distribute)
