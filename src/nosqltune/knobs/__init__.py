"""Knob spaces: which settings of a datastore can be tuned, their types, ranges, defaults and where they go.

A knob space is data (`<system>.yaml` next to this package), checked when it is loaded. The package is split by
concept: knob.py (the Knob type and its values), knob_space.py (a datastore's knobs, their sets, subsets and
rules), files.py (reading knob files, named configurations and override files), rules.py (relations between
knobs), space.py (the tuning space an optimizer searches), best_practice.py (documented rules of thumb).
`load_space("cassandra")` -> `KnobSpace` of `Knob`s.

Importing this package is cheap: PyYAML, difflib and importlib.resources are imported only when needed.
"""

from .files import (is_named_config, load_config, load_overrides_file, load_space, load_space_file, named_configs,
                    parse_assignments)
from .knob import Knob, KnobError
from .knob_space import KnobSpace

__all__ = ["KnobError", "Knob", "KnobSpace", "load_space", "load_space_file", "parse_assignments",
           "load_overrides_file", "load_config", "named_configs", "is_named_config"]
