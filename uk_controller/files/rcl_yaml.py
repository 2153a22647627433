"""Where ROS 2's parameter-file parser reads a YAML file differently from PyYAML.

rcl (``rcl_yaml_param_parser``, the C parser behind ``--params-file`` and every
launch ``parameters=[file]``) reads the plain (unquoted) scalars ``y Y yes Yes
YES true True TRUE on On ON`` as boolean true and ``n N no No NO false False
FALSE off Off OFF`` as false. PyYAML (YAML 1.1, what our loader uses) agrees
on all of them except ``y Y n N``, which it reads as strings. So ``axes: [x, y]``
loads as two strings here, while rcl sees a string and a bool and rejects the
whole file ("Sequence should be of same type. Value type 'bool' do not belong
at line_num ..."), and ``axis: y`` reaches a node as ``True``.

:func:`rcl_disagreements` finds those scalars (with their line and dotted
key) so the loader can say what is wrong and how to fix it (quote them).
"""

from __future__ import annotations

import yaml

RCL_TRUE = ('y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON')
RCL_FALSE = ('n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF')
STR_TAG = 'tag:yaml.org,2002:str'


def rcl_disagreements(text):
    """[(line (1-based), dotted key, scalar, rcl's bool)] for plain scalars PyYAML reads as strings
    but rcl reads as booleans. Keys below ``ros__parameters`` are given without the node section."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return []  # the loader reports invalid YAML itself
    found = []

    def walk(node, path):
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else '?'
                walk(value, [] if name == 'ros__parameters' else path + [name])
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, path[:-1] + [f'{path[-1]}[{i}]'] if path else [f'[{i}]'])
        elif isinstance(node, yaml.ScalarNode):
            if node.style is None and node.tag == STR_TAG and node.value in RCL_TRUE + RCL_FALSE:
                found.append((node.start_mark.line + 1, '.'.join(path), node.value, node.value in RCL_TRUE))

    if root is not None:
        walk(root, [])
    return found


def explain(found):
    """One message for :func:`rcl_disagreements`' findings: what rcl does and the quoted fix."""
    parts = [
        f"line {line}, {key}: {value} (ROS reads {str(truth).lower()}; write '{value}')"
        for line, key, value, truth in found
    ]
    return (
        'ROS 2 reads an unquoted '
        + ', '.join(sorted({f[2] for f in found}))
        + ' as a boolean, so a node given this file would reject it (a list mixing strings and '
        'booleans) or get true/false instead of the name; quote it: ' + '; '.join(parts)
    )


class RclSafeDumper(yaml.SafeDumper):
    """yaml.SafeDumper that quotes the strings rcl would read as booleans (PyYAML writes a bare ``y``)."""


def _represent_str(dumper, value):
    style = "'" if value in RCL_TRUE + RCL_FALSE else None
    return dumper.represent_scalar(STR_TAG, value, style=style)


RclSafeDumper.add_representer(str, _represent_str)


def dump(data, stream=None, **kwargs):
    """yaml.safe_dump whose output rcl reads as PyYAML does (see :func:`rcl_disagreements`)."""
    return yaml.dump(data, stream, Dumper=RclSafeDumper, **kwargs)
