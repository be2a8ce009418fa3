#!/bin/sh
# Compile the notification-log listener and the metastore main class (listener/) against the PySpark wheel's Hive 2.3 jars
# into build/listener/hms-gateway-listener.jar. Needs javac (default-jdk-headless) and the
# venv with pyspark. Usage: scripts/build-listener.sh [python]   (default .venv/bin/python)
set -eu
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
JARS=$("$PY" -c 'from demo.hms import pyspark_jars_dir; print(pyspark_jars_dir())')
OUT=build/listener
rm -rf "$OUT/classes"
mkdir -p "$OUT/classes"
# --release 8: the jar then loads in any JVM HMS 2.3 runs on.
javac -nowarn -Xlint:-options --release 8 -cp "$JARS/*" -d "$OUT/classes" \
    $(find listener/src/main/java -name '*.java')
cp listener/src/main/resources/* "$OUT/classes/"
# Written aside and renamed: a running metastore may have the old jar open.
jar cf "$OUT/hms-gateway-listener.jar.tmp" -C "$OUT/classes" .
mv -f "$OUT/hms-gateway-listener.jar.tmp" "$OUT/hms-gateway-listener.jar"
echo "built $OUT/hms-gateway-listener.jar"
