"""The agent loop: preparing an agent run, its hook and gates, promotion, and the campaign overview."""
