"""Games for the search: a generic model + environment adapter, pgx games, hashing.

``jaxpuct.envs.adapter`` turns a policy-value function and batched environment
functions into the ``root_fn``/``recurrent_fn`` pair the search calls;
``jaxpuct.envs.pgx_games`` wraps pgx environments (pgx is imported only there);
``jaxpuct.envs.pgx_2048`` splits pgx's 2048 into move and tile spawn, and
``jaxpuct.envs.pgx_backgammon`` pgx's backgammon into a checker move and the roll, for
chance-node search (:func:`jaxpuct.stochastic_policy`);
``jaxpuct.envs.hashing`` gives Zobrist hashes for graph search;
``jaxpuct.envs.symmetries`` evaluates leaves under board symmetries,
``jaxpuct.envs.ensemble`` averages several networks of one architecture,
``jaxpuct.envs.rollouts`` mixes rollout returns into the leaf value, and
``jaxpuct.envs.connect_four`` is pgx's connect four whose move checks only the lines
through the new stone (cheaper rollouts). None of these
modules imports Flax.
"""
