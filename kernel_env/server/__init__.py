"""The service: app (auth, limits, CLI), environment (episodes), reward, prompts.

Import the submodules directly (`kernel_env.server.app`); this package imports nothing heavy.
"""
