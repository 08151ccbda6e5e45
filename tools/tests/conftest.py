"""Command-line options and fixtures of the hvd-tune end-to-end tests
(test_cli_*.py) on a real store made by a real 2-rank sweep.

Usage: python3 -m pytest tools/tests [-k CASE] --hvd-tune BIN --trainer BIN
         --work DIR --source DIR

test_sweep (test_cli_sweep.py) makes the store the other tests read (it runs
first in a run of several files; CTest runs one test per entry, the sweep as a
fixture). Every check is on real processes and real files.
"""
import argparse
import os

import pytest

import cli_helpers


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


def pytest_collection_modifyitems(items):
    """test_sweep first: the others read the store it makes."""
    items.sort(key=lambda item: item.name != "test_sweep")


@pytest.fixture(autouse=True)
def cli_args(request):
    """The command line's --hvd-tune, --trainer, --work and --source, as
    cli_helpers.ARGS for the helpers and the tests."""
    vars(cli_helpers.ARGS).update(vars(request.config.cli_args))
    os.makedirs(cli_helpers.ARGS.work, exist_ok=True)
