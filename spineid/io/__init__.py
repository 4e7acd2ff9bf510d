"""Files in and out: model files (one reader per model kind, in a registry), CSV tables and
measured data, TOML documents, the bundled data files and tables, and export to other
programs."""

from ._atomic import (
    atomic_path as atomic_path,
    write_text_atomically as write_text_atomically,
)
from ._columns import (
    ColumnsRead as ColumnsRead,
    read_quantities as read_quantities,
)
from ._datasets import (
    christophy_stiffness as christophy_stiffness,
    DataTable as DataTable,
    dataset_path as dataset_path,
    fritzkowski_parameters as fritzkowski_parameters,
    K_F_E as K_F_E,
    liu_implant_nodes as liu_implant_nodes,
    liu_l5_s1_phases as liu_l5_s1_phases,
    liu_origin_nodes as liu_origin_nodes,
    liu_scoliosis_curve as liu_scoliosis_curve,
    liu_vertebra_nodes as liu_vertebra_nodes,
)
from ._design_file import (
    DesignFile as DesignFile,
    ProtocolSpec as ProtocolSpec,
    read_design_file as read_design_file,
)
from ._exports import export_model as export_model
from ._kinds._spatial_chain import chain_document as chain_document
from ._measurements import (
    LoadDisplacementData as LoadDisplacementData,
    Measurement as Measurement,
    QuasiStaticTest as QuasiStaticTest,
    markers_measurement as markers_measurement,
    own_markers_seen as own_markers_seen,
    registered_lab_frame as registered_lab_frame,
    states_start as states_start,
    MARKER_SUFFIXES as MARKER_SUFFIXES,
    read_load_displacement as read_load_displacement,
    read_markers as read_markers,
    read_measurement as read_measurement,
    read_quasi_static as read_quasi_static,
    write_quasi_static as write_quasi_static,
)
from ._model_file import (
    load_model as load_model,
    load_model_file as load_model_file,
    model_from_document as model_from_document,
    model_kinds as model_kinds,
    ModelFile as ModelFile,
    ModelReader as ModelReader,
    register_model_kind as register_model_kind,
    unregister_model_kind as unregister_model_kind,
    write_model_file as write_model_file,
)
from ._c3d import read_c3d as read_c3d
from ._osim import read_osim as read_osim
from ._osim_write import write_osim_values as write_osim_values
from ._opensim import (
    opensim_model_xml as opensim_model_xml,
    write_opensim_model as write_opensim_model,
)
from ._tables import (
    read_table as read_table,
    read_trajectory as read_trajectory,
    write_table as write_table,
    write_trajectory as write_trajectory,
)
from ._toml import (
    DocumentChecker as DocumentChecker,
    dumps_toml as dumps_toml,
    read_toml as read_toml,
    simulation_settings as simulation_settings,
)
from ._storage import (
    MarkerTrajectories as MarkerTrajectories,
    read_storage as read_storage,
    read_trc as read_trc,
    StorageTable as StorageTable,
    write_storage as write_storage,
    write_trc as write_trc,
)
