"""Drive a real JupyterLab in headless Chromium for the end-to-end notebook test."""
