"""A tiny Python dynamic provider for the engine smoke test: a resource that is a file on local disk.

The engine smoke test's program imports ``SmokeFile`` from here, so dill stores the provider in the state
by reference, as ``tests.engine.smoke_provider.SmokeFileProvider``. The dynamic provider process
(``pulumi-resource-pulumi-python``, run with the project's .venv) must be able to import this module under
that same name: the test puts the repository root on PYTHONPATH for every engine command
(``tests._engine.engine_env(..., pythonpath=[ROOT])``). Keep this module's path and the class name stable
while any state refers to them.
"""

from __future__ import annotations

import os
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult


class SmokeFileProvider(ResourceProvider):
    """Creates, updates and deletes a text file; holds no state of its own (it is pickled by reference)."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        path = str(props["path"])
        with open(path, "w", encoding="utf-8") as f:
            f.write(str(props["content"]))
        return CreateResult(id_=path, outs={"path": path, "content": props["content"]})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = ["path"] if olds.get("path") != news.get("path") else []
        changed = replaces or olds.get("content") != news.get("content")
        return DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=True)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        with open(str(news["path"]), "w", encoding="utf-8") as f:
            f.write(str(news["content"]))
        return UpdateResult(outs={"path": news["path"], "content": news["content"]})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        if not os.path.exists(id_):
            return ReadResult(id_=None, outs={})
        with open(id_, encoding="utf-8") as f:
            return ReadResult(id_=id_, outs={"path": id_, "content": f.read()})

    def delete(self, id_: str, _props: dict[str, Any]) -> None:
        try:
            os.remove(id_)
        except FileNotFoundError:
            pass


class SmokeFile(Resource):
    path: pulumi.Output[str]
    content: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        path: pulumi.Input[str],
        content: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(SmokeFileProvider(), name, {"path": path, "content": content}, opts)
