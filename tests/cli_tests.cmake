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
latte_cli_test(NAME cli_help_tb_ctv RC 0 MATCH "-tb, --threads-batch N" "-ctv, --cache-type-v TYPE" ARGS --help)
latte_cli_test(NAME cli_bad_threads_batch RC 2 ERROR MATCH "error: -tb: .*'x'" ARGS -m x -tb x)
latte_cli_test(NAME cli_bad_cache_type_v RC 2 ERROR MATCH "error: -ctv: .*'q9'" "f32, f16, bf16, q8_0" ARGS -m x -ctv q9)
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
                     "KV cache: [0-9]+ bytes \\(f16, mla auto"
               ARGS -m ${LATTE_TINY_MODEL} -p Hello -n 8 --temp 0 -t 2)
latte_cli_test(NAME cli_tiny_tokens RC 0 TIMEOUT 120 MATCH "eval: [0-9]+ tokens"
               ARGS -m ${LATTE_TINY_MODEL} --tokens 0,5,7 -n 4 --temp 0 -t 2)
latte_cli_test(NAME cli_tiny_token_out_of_range RC 2 ERROR TIMEOUT 60 MATCH "error: --tokens: .*999999"
               ARGS -m ${LATTE_TINY_MODEL} --tokens 999999)
# -t / -tb: generation on 2 threads, the prompt on 1 (the pool has 2)
latte_cli_test(NAME cli_tiny_threads_batch RC 0 TIMEOUT 120 MATCH "^Hello" "threads 2 \\(batch 1\\)"
               ARGS -m ${LATTE_TINY_MODEL} -p Hello -n 4 --temp 0 -t 2 -tb 1 --verbose)
# -ctv: a V type of its own in -mla 0; ignored with a warning in the latent modes (silently when equal to -ctk)
latte_cli_test(NAME cli_tiny_ctv_mla0 RC 0 TIMEOUT 120 MATCH "^Hello" "cache f16 \\(V q8_0\\)"
               ARGS -m ${LATTE_TINY_MODEL} -p Hello -n 4 --temp 0 -t 2 -mla 0 -ctk f16 -ctv q8_0 --verbose)
latte_cli_test(NAME cli_tiny_ctv_latent_warns RC 0 TIMEOUT 120 MATCH "^Hello"
               "warning: -ctv q8_0 is ignored \\(mla 1 absorbed\\): the latent cache has no separate V rows"
               ARGS -m ${LATTE_TINY_MODEL} -p Hello -n 4 --temp 0 -t 2 -mla 1 -ctk f16 -ctv q8_0)
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

# Q8_0 weights are repacked at load into 16-row groups (the load report says so); --no-repack keeps
# the file's layout.
set(_tiny_q8 ${CMAKE_BINARY_DIR}/models/tiny-q8_0.gguf)
add_test(NAME cli_make_tiny_q8_0 COMMAND latte-mkmodel --preset tiny --type q8_0 -o ${_tiny_q8} --quiet)
set_tests_properties(cli_make_tiny_q8_0 PROPERTIES FIXTURES_SETUP tiny_q8_0 LABELS cli)
latte_cli_test(NAME cli_tiny_q8_0_repacked RC 0 TIMEOUT 120 MATCH "^Hello" "load: repacked [0-9]+ q8_0/q4_0 matrices"
               ARGS -m ${_tiny_q8} -p Hello -n 4 --temp 0 -t 2 --verbose)
add_test(NAME cli_tiny_q8_0_no_repack
         COMMAND sh -c "out=$(\"$0\" \"$@\" 2>&1) || exit 1; case \"$out\" in *repacked*) echo \"$out\"; exit 1;; *Hello*) exit 0;; esac; exit 1"
                 ${_latte_cli} -m ${_tiny_q8} -p Hello -n 4 --temp 0 -t 2 --verbose --no-repack)
set_tests_properties(cli_tiny_q8_0_no_repack PROPERTIES TIMEOUT 120 LABELS cli)
set_tests_properties(cli_tiny_q8_0_repacked cli_tiny_q8_0_no_repack PROPERTIES FIXTURES_REQUIRED tiny_q8_0)

# K-quant weights (issue 7): latte-mkmodel writes q4_K (rows that are not a multiple of 256, the tiny
# model's attn_q_b, fall back to q8_0 and it says so), and the CLI loads and runs the file.
set(_tiny_q4k ${CMAKE_BINARY_DIR}/models/tiny-q4_K.gguf)
add_test(NAME cli_make_tiny_q4_K
         COMMAND sh -c "out=$(\"$0\" \"$@\" 2>&1) || exit 1; case \"$out\" in *'written as q8_0 instead of q4_K'*) exit 0;; esac; echo \"$out\"; exit 1"
                 $<TARGET_FILE:latte-mkmodel> --preset tiny --type q4_K -o ${_tiny_q4k} --quiet)
set_tests_properties(cli_make_tiny_q4_K PROPERTIES FIXTURES_SETUP tiny_q4_K LABELS cli)
latte_cli_test(NAME cli_tiny_q4_K RC 0 TIMEOUT 120 MATCH "^Hello" "load: .*49 tensors \\(.*29 q4_K .*3 q8_0"
               ARGS -m ${_tiny_q4k} -p Hello -n 4 --temp 0 -t 2 --verbose)
set_tests_properties(cli_tiny_q4_K PROPERTIES FIXTURES_REQUIRED tiny_q4_K)

# ---- latte-bench and latte-sweep (issue 6) -----------------------------------------------------
# latte_tool_test(TOOL <target> NAME <name> RC <code> MATCH <regex>... [ERROR] [TIMEOUT <s>]
#                 [ENV VAR=VALUE...] ARGS ...):
# latte_cli_test's checks for another tool (an error is one `<tool>: error:` line, nothing on stdout),
# run with ENV's variables set.
function(latte_tool_test)
  cmake_parse_arguments(T "ERROR" "TOOL;NAME;RC;TIMEOUT" "MATCH;ARGS;ENV" ${ARGN})
  list(LENGTH T_MATCH _n)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 20)
  endif()
  set(_err 0)
  if(T_ERROR)
    set(_err 1)
  endif()
  set(_env)
  if(T_ENV)
    set(_env env ${T_ENV})
  endif()
  string(REPLACE "latte-cli: error: " "${T_TOOL}: error: " _check "${_latte_cli_check}")
  add_test(NAME ${T_NAME}
           COMMAND sh -c "${_check}" sh ${T_RC} ${_err} ${_n} ${T_MATCH} ${_env} $<TARGET_FILE:${T_TOOL}> ${T_ARGS}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS cli)
endfunction()

latte_tool_test(TOOL latte-bench NAME bench_help RC 0 MATCH "-pg PP,TG" "-ctk, --cache-type-k TYPE,\\.\\.\\." ARGS --help)
latte_tool_test(TOOL latte-bench NAME bench_missing_model RC 2 ERROR MATCH "error: missing -m" ARGS -p 8)
latte_tool_test(TOOL latte-bench NAME bench_bad_mla RC 2 ERROR MATCH "error: -mla: '9' is not an MLA mode" ARGS -m x -mla 1,9)
latte_tool_test(TOOL latte-bench NAME bench_bad_list RC 2 ERROR MATCH "error: -p: empty item in the list '8,,16'" ARGS -m x -p 8,,16)
latte_tool_test(TOOL latte-bench NAME bench_bad_pg RC 2 ERROR MATCH "error: -pg: expected PP,TG, got '512'" ARGS -m x -pg 512)
latte_tool_test(TOOL latte-bench NAME bench_bad_output RC 2 ERROR MATCH "error: -o: expected one of md, csv, json, jsonl, got 'xml'" ARGS -m x -o xml)
latte_tool_test(TOOL latte-bench NAME bench_bad_reps RC 2 ERROR MATCH "error: -r: '0' is out of range" ARGS -m x -r 0)
latte_tool_test(TOOL latte-bench NAME bench_no_tests RC 2 ERROR TIMEOUT 60 MATCH "error: no tests"
                ARGS -m ${LATTE_TINY_MODEL} -p 0 -n 0)
latte_tool_test(TOOL latte-bench NAME bench_missing_model_file RC 1 ERROR MATCH "error: .*/nonexistent/m\\.gguf"
                ARGS -m ${LATTE_TINY_MODEL},/nonexistent/m.gguf -p 8)
latte_tool_test(TOOL latte-bench NAME bench_tiny_md RC 0 TIMEOUT 180
                MATCH "^\\| model \\| size \\| params \\| isa \\| threads \\| mla \\| type_k \\| fa \\| test \\| t/s \\|$"
                      "^\\| deepseek2 5\\.69M F32 \\| 21\\.74 MiB \\| 5\\.69 M \\| (scalar|avx2|avx512|amx|neon) \\| 2 \\| 1 \\| q8_0 \\| 1 \\| pp16 \\| [0-9.]+ ± [0-9.]+ \\|$"
                      "\\| tg4 \\|" "\\| pp16\\+tg4 \\|" "\\| tg4 @ d32 \\|" "\\| pp16 @ d8 \\|"
                ARGS -m ${LATTE_TINY_MODEL} -p 16 -n 4 -pg 16,4 -gp 32,4 -d 0,8 -r 2 -t 2 -mla 1 -ctk q8_0)
# --profile: one line per test on stderr with every phase's share and the time per token
latte_tool_test(TOOL latte-bench NAME bench_profile RC 0 TIMEOUT 120
                MATCH "^latte-bench: profile pp16, mla auto \\([12,]+\\), q8_0, 2 threads: attn-proj [0-9.]+%, attention [0-9.]+%, moe-route [0-9.]+%, ffn [0-9.]+%, head [0-9.]+%, rest [0-9.]+% \\([0-9.]+ ms per token\\)$"
                      "^latte-bench: profile tg2 @ d8, mla auto \\([12,]+\\), q8_0, 2 threads: attn-proj"
                ARGS -m ${LATTE_TINY_MODEL} -p 16 -n 0 -gp 8,2 -r 1 -t 2 -ctk q8_0 --profile)
# JSON: the cross product (2 thread counts x 2 modes x 2 cache types x 2 tests = 16 rows), each with
# llama-bench's fields, r samples, and avg_ts consistent with the samples.
set(_latte_bench_json [=[
"$@" > "${TMPDIR:-/tmp}/latte-bench-test.$$.json" || { echo "FAIL: exit $?"; exit 1; }
python3 - "${TMPDIR:-/tmp}/latte-bench-test.$$.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
assert isinstance(rows, list) and len(rows) == 16, f"expected 16 rows, got {len(rows)}"
fields = ["model_filename", "model_type", "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads",
          "type_k", "flash_attn", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns", "avg_ts",
          "stddev_ts", "samples_ns", "samples_ts", "mla", "isa"]
combos = set()
for r in rows:
    missing = [f for f in fields if f not in r]
    assert not missing, f"missing fields {missing}"
    assert len(r["samples_ns"]) == 3 and len(r["samples_ts"]) == 3, r
    n = r["n_prompt"] + r["n_gen"]
    ts = [n * 1e9 / ns for ns in r["samples_ns"]]
    assert abs(sum(ts) / 3 - r["avg_ts"]) <= 1e-3 * r["avg_ts"], (ts, r["avg_ts"])
    assert r["model_size"] > 0 and r["model_n_params"] > 0 and r["flash_attn"] is False
    assert r["isa"] in ("scalar", "avx2", "avx512", "amx", "neon"), r["isa"]
    combos.add((r["n_threads"], r["mla"], r["type_k"], r["n_prompt"], r["n_gen"]))
assert len(combos) == 16, combos
print("PASS")
PY
rc=$?
rm -f "${TMPDIR:-/tmp}/latte-bench-test.$$.json"
exit $rc
]=])
add_test(NAME bench_tiny_json_cross_product
         COMMAND sh -c "${_latte_bench_json}" sh $<TARGET_FILE:latte-bench> -m ${LATTE_TINY_MODEL} -p 8 -n 2
                 -t 1,2 -mla 1,2 -ctk f16,q8_0 -fa off -r 3 -o json)
set_tests_properties(bench_tiny_json_cross_product PROPERTIES TIMEOUT 300 LABELS cli)
latte_tool_test(TOOL latte-bench NAME bench_tiny_csv RC 0 TIMEOUT 120
                MATCH "^model_filename,model_type,model_size,model_n_params,n_batch,n_ubatch,n_threads,type_k,flash_attn,mla,"
                      "^\"[^\"]*tiny\\.gguf\",\"deepseek2 5\\.69M F32\",\"22795744\",\"5691016\",\"64\",\"8\",\"2\",\"f16\",\"true\",\"auto\",\"16\",\"0\",\"0\","
                ARGS -m ${LATTE_TINY_MODEL} -p 16 -n 0 -b 64 -ub 8 -r 1 -t 2 -o csv)

latte_tool_test(TOOL latte-sweep NAME sweep_help RC 0 MATCH "--plot-from A\\.jsonl" ARGS --help)
latte_tool_test(TOOL latte-sweep NAME sweep_missing_model RC 2 ERROR MATCH "error: missing -m" ARGS -c 64)
latte_tool_test(TOOL latte-sweep NAME sweep_bad_output RC 2 ERROR MATCH "error: -o: expected md or jsonl, got 'csv'" ARGS -m x -o csv)
latte_tool_test(TOOL latte-sweep NAME sweep_labels_without_runs RC 2 ERROR MATCH "error: --label: 2 labels for 1 --plot-from runs"
                ARGS --plot-from a.jsonl --label a --label b --plot x.svg)
latte_tool_test(TOOL latte-sweep NAME sweep_plot_from_missing_file RC 1 ERROR MATCH "error: --plot-from: cannot read '/nonexistent/a\\.jsonl'"
                ARGS --plot-from /nonexistent/a.jsonl --plot /nonexistent/x.svg)
latte_tool_test(TOOL latte-sweep NAME sweep_ubatch_over_context RC 2 ERROR MATCH "error: -ub 64 is more than the context"
                ARGS -m x -c 32 -ub 64)
# The table: 128 / 32 = 4 steps at N_KV 0, 32, 64, 96.
latte_tool_test(TOOL latte-sweep NAME sweep_tiny_table RC 0 TIMEOUT 180
                MATCH "^\\|    PP \\|     TG \\|   N_KV \\|   T_PP s \\| S_PP t/s \\|   T_TG s \\| S_TG t/s \\|$"
                      "^\\|    32 \\|      4 \\|      0 \\| +[0-9.]+ \\| +[0-9.]+ \\|" "^\\|    32 \\|      4 \\|     96 \\|"
                      "n_kv_max = 128, n_ubatch = 32, n_gen = 4"
                ARGS -m ${LATTE_TINY_MODEL} -c 128 -ub 32 -n 4 -t 2)
# A run saved as JSON lines, a second run plotted together with it: the SVG must be well-formed
# XML (python's parser), hold both runs' legend labels, and render to a non-empty PNG
# (rsvg-convert, from librsvg2-bin; skipped, exit 77, where it is missing).
set(_latte_sweep_plot [=[
sweep=$1 model=$2
d="${TMPDIR:-/tmp}/latte-sweep-test.$$"
mkdir -p "$d" || exit 1
trap 'rm -rf "$d"' EXIT
"$sweep" -m "$model" -c 96 -ub 32 -n 4 -t 2 -mla 1 -o jsonl > "$d/mla1.jsonl" || { echo "FAIL: first run"; exit 1; }
[ "$(wc -l < "$d/mla1.jsonl")" -eq 3 ] || { echo "FAIL: expected 3 JSON lines"; cat "$d/mla1.jsonl"; exit 1; }
"$sweep" -m "$model" -c 96 -ub 32 -n 4 -t 2 -mla 0 -o jsonl --plot-from "$d/mla1.jsonl" --label "saved <mla 1>" \
  --plot "$d/plot.svg" > "$d/mla0.jsonl" || { echo "FAIL: second run"; exit 1; }
python3 - "$d/plot.svg" <<'PY' || exit 1
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
assert "saved <mla 1>" in texts, texts
assert any(t.startswith("tiny.gguf, mla 0") for t in texts), texts
assert "PP speed (tokens/s)" in texts and "TG speed (tokens/s)" in texts, texts
assert len(list(root.iter("{http://www.w3.org/2000/svg}polyline"))) == 4
print("SVG well-formed, 2 runs, 2 panels")
PY
if ! command -v rsvg-convert >/dev/null 2>&1; then echo "SKIP: rsvg-convert missing"; exit 77; fi
rsvg-convert "$d/plot.svg" -o "$d/plot.png" || { echo "FAIL: rsvg-convert"; exit 1; }
size=$(wc -c < "$d/plot.png")
[ "$size" -gt 1000 ] || { echo "FAIL: PNG is $size bytes"; exit 1; }
echo "PASS: PNG $size bytes"
]=])
add_test(NAME sweep_tiny_plot COMMAND sh -c "${_latte_sweep_plot}" sh $<TARGET_FILE:latte-sweep> ${LATTE_TINY_MODEL})
set_tests_properties(sweep_tiny_plot PROPERTIES TIMEOUT 240 LABELS cli SKIP_RETURN_CODE 77)

# ---- sampling and conversation (issue 6) -------------------------------------------------------
latte_cli_test(NAME cli_bad_repeat_penalty RC 2 ERROR MATCH "error: --repeat-penalty: .*'0'" ARGS -m x --repeat-penalty 0)
latte_cli_test(NAME cli_bad_repeat_last_n RC 2 ERROR MATCH "error: --repeat-last-n: .*'-2'" ARGS -m x --repeat-last-n -2)
latte_cli_test(NAME cli_bad_chat_template RC 2 ERROR MATCH "error: --chat-template: .*'chatml'" ARGS -m x --chat-template chatml)
latte_cli_test(NAME cli_cnv_with_tokens RC 2 ERROR MATCH "error: -cnv .*--tokens" ARGS -m x -cnv --tokens 1,2)
# A huge penalty over the whole history forbids every token seen so far: greedy generation can then
# never repeat one (without it, the tiny random model repeats within 24 tokens).
add_test(NAME cli_tiny_repeat_penalty_changes_output
         COMMAND sh -c [=[
a=$("$@" 2>/dev/null) || exit 1
b=$("$@" --repeat-penalty 1000 --repeat-last-n -1 2>/dev/null) || exit 1
printf -- '--- plain\n%s\n--- penalized\n%s\n' "$a" "$b"
[ -n "$a" ] && [ "$a" != "$b" ] || { echo "FAIL: the penalty changed nothing"; exit 1; }
echo PASS
]=] sh $<TARGET_FILE:latte-cli> -m ${LATTE_TINY_MODEL} -p Hello -n 24 --temp 0 -t 2)
set_tests_properties(cli_tiny_repeat_penalty_changes_output PROPERTIES TIMEOUT 120 LABELS cli)
# -cnv: two non-empty stdin lines are two turns (the blank line is skipped); with --verbose the
# turns' token ids are printed: the first starts with BOS, the second does not, and the second
# turn's prompt is the V2 template's "User: ...\n\nAssistant:" for the tiny model's vocabulary.
add_test(NAME cli_tiny_conversation
         COMMAND sh -c [=[
out=$(printf 'Hello\n\nWhat next\n' | "$@" 2>&1) || { echo "FAIL: exit $?"; printf '%s\n' "$out"; exit 1; }
printf '%s\n' "$out" | grep -v '^  '
printf '%s\n' "$out" | grep -q '^chat template: deepseek2' || { echo "FAIL: no template line"; exit 1; }
printf '%s\n' "$out" | grep -Eq '^\[turn 1: [0-9]+ prompt tokens, [0-9]+ generated' || { echo "FAIL: no turn 1"; exit 1; }
printf '%s\n' "$out" | grep -Eq '^\[turn 2: [0-9]+ prompt tokens' || { echo "FAIL: no turn 2"; exit 1; }
printf '%s\n' "$out" | grep -q '^\[turn 3' && { echo "FAIL: a blank line made a turn"; exit 1; }
printf '%s\n' "$out" | grep -Eq '^turn 1: [0-9]+ tokens: 0 ' || { echo "FAIL: turn 1 does not start with BOS"; exit 1; }
printf '%s\n' "$out" | grep -Eq '^turn 2: [0-9]+ tokens: 0 ' && { echo "FAIL: turn 2 starts with BOS"; exit 1; }
printf '%s\n' "$out" | grep -q '^conversation: 2 turns' || { echo "FAIL: no summary"; exit 1; }
# turn 2's ids = the plain prompt "User: What next\n\nAssistant:" tokenized (less its BOS)
t2=$(printf '%s\n' "$out" | sed -n 's/^turn 2: [0-9]* tokens: //p')
want=$("$1" -m "$3" -p "$(printf 'User: What next\n\nAssistant:')" -n 0 -t 2 --verbose 2>&1 >/dev/null | sed -n 's/^prompt: [0-9]* tokens: 0 //p')
echo "turn 2 ids: $t2"; echo "template ids: $want"
[ -n "$want" ] && [ "$t2" = "$want" ] || { echo "FAIL: turn 2 is not the V2 template's text"; exit 1; }
echo PASS
]=] sh $<TARGET_FILE:latte-cli> -m ${LATTE_TINY_MODEL} -cnv -p "Be brief." -n 4 --temp 0 -t 2 --verbose)
set_tests_properties(cli_tiny_conversation PROPERTIES TIMEOUT 120 LABELS cli)

# -b splits the prompt into decode calls; --isa forces a kernel level (same greedy text as auto here).
latte_cli_test(NAME cli_tiny_batch_split RC 0 TIMEOUT 120 MATCH "prompt eval"
               ARGS -m ${LATTE_TINY_MODEL} -p "Hello there, general reader" -b 3 -ub 2 -n 4 --temp 0 -t 2)
latte_cli_test(NAME cli_tiny_isa_scalar RC 0 TIMEOUT 120 MATCH "prompt eval" "^kernels: scalar \\(--isa\\)$"
               ARGS -m ${LATTE_TINY_MODEL} -p Hello -n 4 --temp 0 -t 2 --isa scalar)
latte_cli_test(NAME cli_bad_isa RC 2 ERROR MATCH "error: --isa: .*'sse9'" ARGS -m x --isa sse9)

# A kernel level this CPU or build lacks fails before the model is read: the error names the level,
# not the (missing) file, and the tools write nothing to stdout. neon is never built for an x86-64
# host, avx512 never for an aarch64 one.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)")
  set(_latte_absent_isa avx512)
else()
  set(_latte_absent_isa neon)
endif()
latte_cli_test(NAME cli_absent_isa RC 1 ERROR MATCH "^latte-cli: error: kernel level '${_latte_absent_isa}' \\(LATTE_ISA\\) is not available"
               ARGS -m /nonexistent/m.gguf -p Hi --isa ${_latte_absent_isa})
foreach(_tool latte-bench latte-sweep)
  latte_tool_test(TOOL ${_tool} NAME ${_tool}_absent_isa RC 1 ERROR ENV LATTE_ISA=${_latte_absent_isa}
                  MATCH "^${_tool}: error: kernel level '${_latte_absent_isa}' \\(LATTE_ISA\\) is not available"
                  ARGS -m /nonexistent/m.gguf)
endforeach()
