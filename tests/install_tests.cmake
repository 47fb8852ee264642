# The installed package (issue 6): `cmake --install` to a temporary prefix, then examples/ configured
# with find_package(latte) against it, built, and run on the tiny model. The C++ example (static
# library) and the C example (liblatte.so) must print the same greedy text. Included from
# CMakeLists.txt inside the tests block.
set(_latte_install_check [=[
cmake=$1 build=$2 src=$3 model=$4
d="${TMPDIR:-/tmp}/latte-install-test.$$"
rm -rf "$d"; mkdir -p "$d" || exit 1
trap 'rm -rf "$d"' EXIT
"$cmake" --install "$build" --prefix "$d/prefix" > "$d/install.log" || { cat "$d/install.log"; echo "FAIL: install"; exit 1; }
for f in include/latte/latte.h include/latte/latte_c.h lib/liblatte.a lib/liblatte.so \
         lib/cmake/latte/latteConfig.cmake lib/cmake/latte/latteConfigVersion.cmake lib/cmake/latte/latteTargets.cmake; do
  [ -f "$d/prefix/$f" ] || { echo "FAIL: $f not installed"; ls -R "$d/prefix"; exit 1; }
done
gen=""; command -v ninja >/dev/null 2>&1 && gen="-GNinja"
"$cmake" -S "$src/examples" -B "$d/build" $gen -DCMAKE_PREFIX_PATH="$d/prefix" -DCMAKE_BUILD_TYPE=Release > "$d/conf.log" 2>&1 ||
  { cat "$d/conf.log"; echo "FAIL: configuring examples/ against the installed package"; exit 1; }
"$cmake" --build "$d/build" -j2 > "$d/build.log" 2>&1 || { cat "$d/build.log"; echo "FAIL: building examples/"; exit 1; }
a=$("$d/build/simple" "$model" Hello 8) || { echo "FAIL: simple exited $?"; exit 1; }
b=$("$d/build/simple_c" "$model" Hello 8) || { echo "FAIL: simple_c exited $?"; exit 1; }
printf -- '--- simple\n%s\n--- simple_c\n%s\n' "$a" "$b"
case "$a" in Hello?*) ;; *) echo "FAIL: simple did not continue the prompt"; exit 1;; esac
[ "$a" = "$b" ] || { echo "FAIL: the C and C++ examples differ"; exit 1; }
ldd "$d/build/simple_c" | grep -q "$d/prefix/lib/liblatte.so" || { ldd "$d/build/simple_c"; echo "FAIL: simple_c does not use the installed liblatte.so"; exit 1; }
"$d/build/simple_c" /nonexistent.gguf 2> "$d/err"; rc=$?
[ "$rc" -eq 1 ] && grep -q "simple_c: error: .*nonexistent.gguf" "$d/err" || { cat "$d/err"; echo "FAIL: load error not reported (rc $rc)"; exit 1; }
echo PASS
]=])
add_test(NAME capi_install_examples
         COMMAND sh -c "${_latte_install_check}" sh ${CMAKE_COMMAND} ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR} ${LATTE_TINY_MODEL})
set_tests_properties(capi_install_examples PROPERTIES TIMEOUT 600 LABELS install)
