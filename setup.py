"""Package list for setuptools; everything else is in pyproject.toml.

The files of the top-level ``resources/`` folder ship inside the wheel as
``workbench/resources/`` (found there through ``importlib.resources``). pyproject.toml
cannot map a folder to a sub-package while also discovering packages, hence this file.
"""

from setuptools import find_namespace_packages, find_packages, setup

# Sub-folders of resources/ (icons/, ...) are listed as packages of their own only so that
# setuptools does not warn about importable folders left out; their files are package data
# of workbench.resources ("**/*"), whatever the folders are called.
RESOURCE_PACKAGES = [
    "workbench.resources",
    *(
        f"workbench.resources.{name}"
        for name in find_namespace_packages(where="resources")
        if all(part.isidentifier() for part in name.split("."))
    ),
]

setup(
    packages=[*find_packages(include=["workbench", "workbench.*"]), *RESOURCE_PACKAGES],
    package_dir={"workbench.resources": "resources"},
)
