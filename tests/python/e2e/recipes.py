"""The tested recipes of docs/loaders.md, loaded from the doc itself.

A recipe is a ```python block whose first line is `# recipe: NAME`;
load(NAME) runs it in a fresh module and returns the module, so the tests
exercise the code a user copies, not a copy of it.
"""
import os
import re
import types

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                   "docs", "loaders.md")


def load(name):
    text = open(DOC).read()
    blocks = re.findall(r"```python\n# recipe: (\w+)\n(.*?)```", text, re.S)
    code = [body for found, body in blocks if found == name]
    if len(code) != 1:
        raise LookupError("docs/loaders.md has %d recipes named %s"
                          % (len(code), name))
    module = types.ModuleType("recipe_" + name)
    module.__file__ = DOC
    exec(compile(code[0], "%s (recipe %s)" % (DOC, name), "exec"),
         module.__dict__)
    return module
