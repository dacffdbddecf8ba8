"""Any Dockerfile, read as BuildKit and the shell read it: its instructions (syntax), its
RUN lines as commands (shell), variable substitution (expand), pip's command line
(pipargs), the other package managers' (managers), and the audit of a foreign recipe
(audit).

Builds on common/ only; reaches nothing beyond this process.
"""
