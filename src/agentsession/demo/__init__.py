"""``agentsession demo``: an agent's task continued in a second OS process from SQLite.

See :mod:`.runner` for the story and :mod:`.workspace` for the project it repairs.
"""

from .runner import DemoOptions, ModelConfig, continue_demo, run_demo
from .workspace import DemoError

__all__ = ["DemoError", "DemoOptions", "ModelConfig", "continue_demo", "run_demo"]
