#!/usr/bin/python3
"""start-notebook.py as the Jupyter images name it, for Debian's Notebook.

Debian ships the classic Jupyter Notebook (6.4), whose server options live
under NotebookApp; the sample template passes JupyterLab's (jupyter_server
2: ServerApp, IdentityProvider). This translates them and starts the
Notebook on 0.0.0.0:8888, as the Jupyter images do.
"""
import os
import sys

RENAMES = {
    "--IdentityProvider.token": "--NotebookApp.token",
    "--ServerApp.": "--NotebookApp.",
}


def translate(arg):
    for old, new in RENAMES.items():
        if arg.startswith(old):
            return new + arg[len(old):]
    return arg


args = ["jupyter", "notebook", "--ip=0.0.0.0", "--port=8888", "--no-browser"]
args += [translate(a) for a in sys.argv[1:]]
print("start-notebook.py:", " ".join(args), flush=True)
os.execvp(args[0], args)
