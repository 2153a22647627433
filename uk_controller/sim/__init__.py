"""Plants for closed-loop simulation: the UK forward-dynamics plant and a MuJoCo plant."""
