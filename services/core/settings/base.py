"""What every settings group shares: how it is read from the environment."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class Group(BaseSettings):
    """One concern's settings. The environment variable of a field is its name in upper case (any case
    accepted), with no prefix: the names are the deployments' contract. A `.env` file in the working
    directory is read too; a group ignores the variables of the others."""

    # A refused value is never echoed: keys, passwords and tokens are settings too (a start-up error is logged).
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False, hide_input_in_errors=True)
