/**
 * The user's own PyTorch model as a TorchScript file: {@link
 * dev.sparktrainer.model.torchscript.TorchScriptFile} reads and checks the file on the driver,
 * {@link dev.sparktrainer.model.torchscript.TorchScriptSpec} is the model spec that carries it to
 * the executors and checks it against the data, and {@link
 * dev.sparktrainer.model.torchscript.TorchScriptBlock} is the loaded module as a DJL block the step
 * trains (explicit train and eval modes, parameters as the module's own tensors, buffers through
 * the export helper's method). {@code python/export_torchscript.py} writes such files.
 */
package dev.sparktrainer.model.torchscript;
