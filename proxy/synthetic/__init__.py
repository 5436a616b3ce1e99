"""The proxy's synthetic tools, one family: tools the proxy offers the model and runs itself.

Each tool (`base.SyntheticTool`) has a spec that every format renders, an executor, and a budget
rule for its results (`fit`). Adding one is one file and one line in `registry._TOOLS`; the
driver executes any registered tool by its canonical name (`registry.execute`), and a request
may call a tool by another name when a client tool already has its own (`names.ToolNames`).
"""
