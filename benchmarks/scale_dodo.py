"""The project's tasks over the generated graph of benchmarks/scale.py (its size from
$VERL_GRAPH_SCALE_STAGES): dodo.py's task functions, with another Tasks behind them."""

import os

from scale import STAGES_ENV, graph

import dodo
from rocmgraph.cli.tasks import Tasks

dodo.TASKS = Tasks(graph(int(os.environ.get(STAGES_ENV, "200"))))
dodo.DOIT_CONFIG = dodo.TASKS.doit_config()

from dodo import *  # noqa: E402, F403  (doit reads the task_* functions of this module)
