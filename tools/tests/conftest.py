"""Command-line options of the hvd-tune end-to-end tests (test_cli.py)."""
import argparse


def pytest_addoption(parser):
    group = parser.getgroup("hvd-tune")
    group.addoption("--hvd-tune", required=True, help="the hvd-tune binary")
    group.addoption("--trainer", required=True,
                    help="the synthetic_train binary")
    group.addoption("--work", required=True,
                    help="scratch directory; the sweep's store lives here")
    group.addoption("--source", required=True, help="the source tree")


def pytest_configure(config):
    config.cli_args = argparse.Namespace(
        hvd_tune=config.getoption("--hvd-tune"),
        trainer=config.getoption("--trainer"),
        work=config.getoption("--work"),
        source=config.getoption("--source"))
