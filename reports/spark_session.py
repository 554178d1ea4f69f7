"""The one SparkSession a report job uses: local[*] unless told otherwise, quiet, and able to ship the
`reports` package to a cluster's executors (the per-run metrics run there inside mapInPandas)."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from vocab.errors import UserError

# Defaults a user can override with --conf.
DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.files.ignoreCorruptFiles": "true",
    "spark.driver.memory": "4g",
}


def parse_conf(pairs: list[str] | None) -> dict[str, str]:
    conf: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--conf {pair!r}: expected key=value")
        conf[key.strip()] = value
    return conf


def _package_zip() -> str:
    """Zip the `reports` package so executors on a cluster can import the metric definitions. The
    driver serves the file from where it is for the session's life, so it goes when the job's process
    ends (it used to stay in /tmp, one directory per job)."""
    package = Path(__file__).resolve().parent
    directory = Path(tempfile.mkdtemp(prefix="kchaos-reports-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    target = directory / "kchaos_reports.zip"
    with zipfile.ZipFile(target, "w") as zf:
        for path in package.rglob("*.py"):
            zf.write(path, Path("reports") / path.relative_to(package))
    return str(target)


LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
"""


def _log_config() -> str:
    path = Path(tempfile.gettempdir()) / "kchaos-reports-log4j2.properties"
    if not path.exists() or path.read_text() != LOG4J2:
        path.write_text(LOG4J2)
    return str(path)


def make_session(master: str | None = None, conf: dict[str, str] | None = None):  # -> SparkSession
    """Build (or reuse) the job's session. Without --master, a master set by spark-submit wins, else
    local[*]."""
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    # Local workers must run this interpreter (it has pandas/pyarrow); clusters bring their own.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("kchaos-report")
    submitted = SparkConf()
    local = (master or submitted.get("spark.master", "local[*]")).startswith("local")
    if local:
        # One machine: bind to loopback (no "resolves to a loopback address" warnings) and log at WARN
        # from the first line on.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        if "spark.driver.extraJavaOptions" not in (conf or {}):
            builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_log_config()}")
    if master:
        builder = builder.master(master)
    elif not submitted.contains("spark.master"):
        builder = builder.master("local[*]")
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        if not submitted.contains(key) or key in (conf or {}):
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if not spark.sparkContext.master.startswith("local"):
        spark.sparkContext.addPyFile(_package_zip())
    return spark
