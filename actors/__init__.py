"""Ray actors of the Narratoria daemon: thin wrappers that each hold one resource
and delegate to `narratoria.runtime`. (Arrives with the daemon issue.)"""
