"""The readers of the built-in model kinds, one module per kind (registered in
`spineid.io._model_file`)."""
