// Integration tests live beside this file.
