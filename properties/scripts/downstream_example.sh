#!/usr/bin/env bash
# examples/downstream against an installed qtransit (issue 12): `cmake --install` of this build into a
# temporary prefix, then the example configured with find_package(qtransit CONFIG REQUIRED), built
# and its tests run. A test run that finds no test fails.
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
work="$build/downstream"
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
echo "installed into $work/prefix: $(find "$work/prefix" -type f | wc -l) files"
cmake -S "$src/examples/downstream" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DQT_CODEC="$build/codecs/libqt_codec_example-int4.so" \
  >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j"$(nproc)" >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
ctest --test-dir "$work/build" --output-on-failure --no-tests=error
