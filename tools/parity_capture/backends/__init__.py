"""The Python side of parity's backends, one module named like its C++ file in
experiment/backends/ (python_backends, aot_inductor, torchscript, nativert); each function answers
one worker request (worker.py's request table). `exported` is the torch.export step that
aot_inductor and nativert share."""
